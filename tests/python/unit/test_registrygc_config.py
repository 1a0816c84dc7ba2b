"""``gpuops image gc --registry-config``: the registry's config is a user file, read as every
user file is (gpuops.fsio): a FIFO, a device or a folder is exit 2 naming the option, never a
hang (test_fuzz_cli found a FIFO hanging it), and a YAML nested without end is exit 2 too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuops.adapters.registrygc import read_config
from gpuops.errors import InvalidInput


def test_a_fifo_as_the_registry_config_is_an_input_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yml"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput) as err:
        read_config(str(fifo))
    assert err.value.field == "registry_config"


@pytest.mark.parametrize("path", ["/dev/zero", "/"])
def test_a_device_or_folder_is_an_input_error(path: str) -> None:
    with pytest.raises(InvalidInput) as err:
        read_config(path)
    assert err.value.field == "registry_config"


def test_yaml_nested_without_end_is_an_input_error(tmp_path: Path) -> None:
    deep = tmp_path / "config.yml"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(InvalidInput) as err:
        read_config(str(deep))
    assert err.value.field == "registry_config"


def test_a_filesystem_config_is_read(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/registry\n"
        "  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5000\n"
    )
    storage = read_config(str(config))
    assert (storage.root, storage.addr, storage.deletes, storage.readonly) == (
        "/var/lib/registry",
        "127.0.0.1:5000",
        True,
        False,
    )
