"""The memory store: one interface, the Qdrant Edge (embedded) and Qdrant server adapters, BM25 and
dense embedders.
"""
