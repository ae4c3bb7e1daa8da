"""One session to stored memories: read after the high-water mark, extract, deduplicate, upsert,
advance the mark.
"""
