"""marion"""
