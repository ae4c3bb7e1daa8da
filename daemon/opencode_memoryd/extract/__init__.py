"""From transcript to memory candidates: the rules extractor, the LLM client and prompts, the
quality gate and fact comparison.
"""
