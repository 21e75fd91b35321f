"""The on-disk version format, shared by the layer that writes it (`compile`) and those that read it
(`store`, `sdk`): the page span every location extends, chunk records, artifact provenance, document
identities, front matter, names, boilerplate scores. It imports no other part of Sleuth."""
