"""tessera.compiler.ir"""
