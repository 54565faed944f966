"""In-context linear regression with one linear self-attention layer, as an attnlab plugin: the closed forms in
:mod:`attnlab_icl.lsa`, the preset ``icl-lsa`` in :mod:`attnlab_icl.presets` (registered through the entry point)."""
