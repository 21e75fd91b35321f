"""The on-disk version format, shared by the layer that writes it (`compile`) and those that read it
(`store`, `sdk`): chunk records, document identities, artifact front matter, names, boilerplate
scores. It imports no other part of Sleuth."""
