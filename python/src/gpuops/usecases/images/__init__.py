"""Use cases of ``gpuops image``, one module each, so a command imports only what it needs
(``image tag`` must start fast: it imports neither the Docker SDK nor the Kubernetes client):

- :mod:`.registryops`: ``resolve(ref) -> digest``, ``copy_tag(src, dst) -> TagMove``,
  ``inspect(ref) -> ImageInfo``, and ``RegistryAccess`` (TLS/CA, credential variables);
- :mod:`.build`: ``build(BuildRequest) -> BuildRecord``;
- :mod:`.compat`: ``compat(CompatRequest) -> CompatOutcome``, the CUDA-vs-driver gate.

The release side (``promoteTag``) calls these directly with typed requests.
"""
