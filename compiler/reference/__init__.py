"""tessera.compiler.reference"""
