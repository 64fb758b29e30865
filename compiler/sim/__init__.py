"""tessera.compiler.sim"""
