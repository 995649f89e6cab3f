"""Assertion types, one module per family (text, structured, similarity, operational, graded, rag,
scripts, compare). A family registers its types with `factcli.scoring.registry` when it is imported;
the registry imports a family by name the first time a config uses one of its types."""
