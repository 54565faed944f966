"""dohmatob"""
