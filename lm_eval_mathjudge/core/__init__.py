"""The contract and the pure pieces every room uses: types, errors, judges (template + parser),
parsing, prompts, the answer policy, media, the data-set registry and data loading, statistics, redaction, files."""
