"""tessera.training"""
