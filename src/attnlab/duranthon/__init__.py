"""duranthon"""
