"""tessera.compiler.lower"""
