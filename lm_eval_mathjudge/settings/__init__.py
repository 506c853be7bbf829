"""Judge settings: the schema (frozen dataclasses, the judge label), model defaults, the layers
they come from (YAML < environment < metadata < panel member), and the credential rules."""
