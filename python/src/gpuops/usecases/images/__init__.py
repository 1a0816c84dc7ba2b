"""Use cases of ``gpuops image``, one module each, so a command imports only what it needs
(``image tag`` must start fast: it imports neither the Docker SDK nor the Kubernetes client):

- :mod:`.registryops`: ``resolve(ref) -> digest``, ``copy_tag(src, dst) -> TagMove``,
  ``inspect(ref) -> ImageInfo``, and ``RegistryAccess`` (TLS/CA, credential variables);
  ``move_tag`` and ``inspect_image`` are the commands' outcomes of the last two;
- :mod:`.build`: ``build(BuildRequest) -> Outcome[BuildRecord]``;
- :mod:`.compat`: ``compat(CompatRequest) -> Outcome[CompatCheck]``, the CUDA-vs-driver gate
  (refused when a node cannot run the image).

The release side (``promoteTag``) calls these directly with typed requests.
"""
