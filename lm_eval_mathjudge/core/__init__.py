"""The contract and the pure pieces every room uses: types, errors, judges (template + parser),
parsing, prompts, the answer policy, media, the docs of each data set, statistics, redaction, files."""
