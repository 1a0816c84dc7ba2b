"""The lab nvidia-smi against the verbatim samples in shared/docs/NVIDIA_SMI.md and public logs.

Every expected line below is copied from a real nvidia-smi output (the source is named); the
card state fed in carries the same values, so a layout or format drift fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuops_lab import gpus, installer, nvsmi
from gpuops_lab.spec import GpuHost

A100 = GpuHost(name="gpu-a100-01", model="a100-80g", driver="535.161.08", group="gpu_a100")
L40S = GpuHost(name="gpu-l40s-01", model="l40s", driver="550.90.07", group="gpu_l40s")
FAULTY = GpuHost("gpu-a100-03", "a100-80g", "535.161.08", "gpu_a100", faulty=True)


#: 550.90.07 on A100-SXM4-80GB (a public experiment log)
SAMPLE_550_A100 = [
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|=========================================+========================+======================|",
    "|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:00:05.0 Off |                    0 |",
    "| N/A   30C    P0             65W /  400W |       1MiB /  81920MiB |      0%      Default |",
    "|                                         |                        |             Disabled |",
    "+-----------------------------------------+------------------------+----------------------+",
]
#: 550.90.07 on a Tesla T4 (no MIG: "N/A"; a public homework log)
SAMPLE_550_T4 = [
    "|   0  Tesla T4                       On  |   00000000:00:04.0 Off |                    0 |",
    "| N/A   34C    P8             14W /   70W |       1MiB /  15360MiB |      0%      Default |",
    "|                                         |                        |                  N/A |",
]
HEADER_550 = (
    "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |"
)


def state(host: GpuHost, driver: str | None = None, **card: Any) -> dict[str, Any]:
    s = gpus.host_state(host)
    if driver:
        s["driver"] = driver
    for c in s["gpus"]:
        c.update(card)
    return s


def run(argv: str, st: dict[str, Any] | None) -> tuple[str, int]:
    return nvsmi.run(argv.split(), st, now=0.0)


# -- default table ----------------------------------------------------------------------------
def test_header_535_is_89_wide_as_the_real_one() -> None:
    out, code = run("", state(A100))
    lines = out.splitlines()
    assert code == 0
    # NVIDIA_SMI.md, 535.161.08 on 8 x A100-SXM4-40GB
    assert lines[2] == (
        "| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |"
    )
    assert {len(line) for line in lines[1:]} == {89}


def test_header_550_is_91_wide_as_the_real_one() -> None:
    out, _ = run("", state(A100, driver="550.90.07"))
    lines = out.splitlines()
    # NVIDIA_SMI.md, 550.90.07 (UW-Madison-DSI/pixi-docker-chtc README)
    assert lines[2] == HEADER_550
    assert len(lines[2]) == 91


def test_gpu_rows_535_match_a_real_a100_log() -> None:
    st = state(
        A100,
        name="NVIDIA A100-SXM4-40GB",
        memory_total=40960,
        memory_used=4,
        temperature=32,
        power_draw=59.2,
        pci_bus_id="00000000:07:00.0",
    )
    lines = run("-i 0", st)[0].splitlines()
    # 535.161.08 on A100-SXM4-40GB, public terminal log
    assert lines[3:12] == [
        "|-----------------------------------------+----------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                      |               MIG M. |",
        "|=========================================+======================+======================|",
        "|   0  NVIDIA A100-SXM4-40GB          On  | 00000000:07:00.0 Off |                    0 |",
        "| N/A   32C    P0              59W / 400W |      4MiB / 40960MiB |      0%      Default |",
        "|                                         |                      |             Disabled |",
        "+-----------------------------------------+----------------------+----------------------+",
    ]
    assert lines[-7:] == [
        "+---------------------------------------------------------------------------------------+",
        "| Processes:                                                                            |",
        "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
        "|        ID   ID                                                             Usage      |",
        "|=======================================================================================|",
        "|  No running processes found                                                           |",
        "+---------------------------------------------------------------------------------------+",
    ]


def test_gpu_rows_550_match_real_logs() -> None:
    st = state(
        A100,
        driver="550.90.07",
        memory_used=1,
        temperature=30,
        power_draw=65.0,
        pci_bus_id="00000000:00:05.0",
    )
    lines = run("-i 0", st)[0].splitlines()
    # 550.90.07 on A100-SXM4-80GB, public experiment log
    assert lines[4:12] == SAMPLE_550_A100
    # 550.90.07 on a Tesla T4 (no MIG: "N/A"), public homework log
    t4 = state(
        L40S,
        name="Tesla T4",
        memory_total=15360,
        memory_used=1,
        temperature=34,
        pstate="P8",
        power_draw=14.0,
        power_limit=70.0,
        pci_bus_id="00000000:00:04.0",
        persistence=True,
    )
    assert run("-i 0", t4)[0].splitlines()[8:11] == SAMPLE_550_T4


def test_fan_and_off_columns_535() -> None:
    st = state(
        L40S,
        driver="535.161.08",
        name="NVIDIA GeForce RTX 3060",
        fan=0,
        memory_total=12288,
        temperature=37,
        power_draw=32.0,
        power_limit=170.0,
        persistence=False,
        pci_bus_id="00000000:01:00.0",
    )
    for c in st["gpus"]:
        c["ecc"]["uncorrected_volatile"] = "N/A"
    lines = run("-i 0", st)[0].splitlines()
    # 535.161.08 on 2 x RTX 3060, public blog post
    assert lines[8:10] == [
        "|   0  NVIDIA GeForce RTX 3060        Off | 00000000:01:00.0 Off |                  N/A |",
        "|  0%   37C    P0              32W / 170W |      0MiB / 12288MiB |      0%      Default |",
    ]


def test_faulty_card_shows_its_ecc_count_in_the_table() -> None:
    lines = run("-i 5", state(FAULTY))[0].splitlines()
    assert lines[8].endswith("|                    3 |")
    assert lines[9].startswith("| N/A   92C")


# -- --query-gpu ------------------------------------------------------------------------------
def test_csv_header_keeps_units_under_nounits() -> None:
    out, code = run(
        "--query-gpu=name,utilization.gpu,temperature.gpu,power.draw,memory.used "
        "--format=csv,nounits",
        state(A100),
    )
    assert code == 0
    lines = out.splitlines()
    # NVIDIA_SMI.md: the header keeps the unit in brackets under nounits
    assert (
        lines[0] == "name, utilization.gpu [%], temperature.gpu, power.draw [W], memory.used [MiB]"
    )
    assert len(lines) == 9
    name, util, temp, power, used = lines[1].split(", ")
    assert (name, util, used) == ("NVIDIA A100-SXM4-80GB", "0", "0")
    assert temp.isdigit() and float(power) > 0


def test_csv_sample_rtx_pro_6000() -> None:
    st = state(
        L40S,
        name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        temperature=25,
        power_draw=30.39,
        power_limit=600.0,
    )
    fields = (
        "index,name,temperature.gpu,power.draw,power.limit,"
        "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"
    )
    out, _ = run(f"--query-gpu={fields} --format=csv -i 0", st)
    # NVIDIA_SMI.md, RTX PRO 6000 Blackwell sample
    assert out == (
        "index, name, temperature.gpu, power.draw [W], power.limit [W], "
        "ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.volatile.total\n"
        "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 25, 30.39 W, 600.00 W, 0, 0\n"
    )


def test_csv_memory_totals_per_model() -> None:
    h800 = GpuHost("gpu-h800-01", "h800", "550.90.07", "gpu_h800")
    for host, row in (
        (A100, "NVIDIA A100-SXM4-80GB, 81920 MiB"),
        (h800, "NVIDIA H800, 81559 MiB"),
        (L40S, "NVIDIA L40S, 46068 MiB"),
    ):
        out, _ = run("--query-gpu=name,memory.total --format=csv", state(host))
        assert out.splitlines() == ["name, memory.total [MiB]"] + [row] * 8


def test_aliases_come_back_canonical() -> None:
    out, _ = run(
        "--query-gpu=clocks.sm,clocks_throttle_reasons.active,gpu_name,retired_pages.sbe "
        "--format=csv -i 0",
        state(A100),
    )
    header, row = out.splitlines()
    assert header == (
        "clocks.current.sm [MHz], clocks_event_reasons.active, name, "
        "retired_pages.single_bit_ecc.count"
    )
    assert row == "210 MHz, 0x0000000000000001, NVIDIA A100-SXM4-80GB, [N/A]"


def test_missing_values_keep_their_brackets() -> None:
    out, _ = run(
        "--query-gpu=fan.speed,temperature.memory,retired_pages.pending "
        "--format=csv,noheader,nounits -i 0",
        state(L40S),
    )
    assert out == "[N/A], N/A, [N/A]\n"


def test_faulty_card_fields() -> None:
    out, _ = run(
        "--query-gpu=index,temperature.gpu,ecc.errors.uncorrected.volatile.total,"
        "remapped_rows.pending --format=csv,noheader",
        state(FAULTY),
    )
    rows = [r.split(", ") for r in out.splitlines()]
    assert rows[5] == ["5", "92", "3", "Yes"]
    assert all(
        r[2] == "0" and r[3] == "No" and int(r[1]) < 60 for i, r in enumerate(rows) if i != 5
    )


def test_unknown_field_is_the_real_error() -> None:
    out, code = run("--query-gpu=name,cuda_version --format=csv", state(A100))
    assert (out, code) == ('Field "cuda_version" is not a valid field to query.\n\n', 2)


def test_no_driver() -> None:
    for argv in ("", "-L", "--query-gpu=name --format=csv"):
        out, code = run(argv, state(A100, driver=None) | {"driver": None})
        assert code == 9
        assert out.startswith(
            "NVIDIA-SMI has failed because it couldn't communicate with the "
            "NVIDIA driver. Make sure that the latest NVIDIA driver is "
            "installed and running."
        )


def test_bad_arguments_and_ids() -> None:
    assert run("--bogus", state(A100))[1] == 2
    assert run("--query-gpu=name", state(A100))[1] == 2  # --format is mandatory
    assert run("-L -i 8", state(A100)) == ("No devices were found\n", 6)


# -- -L, nvlink, -q ---------------------------------------------------------------------------
def test_list_gpus_shape() -> None:
    out, _ = run("-L", state(A100))
    first = out.splitlines()[0]
    # telegraf#5812: GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)
    assert first.startswith("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-")
    assert [len(p) for p in first.split("UUID: GPU-")[1].rstrip(")").split("-")] == [8, 4, 4, 4, 12]


def test_nvlink_status_and_errors() -> None:
    out, _ = run("nvlink -s -i 0", state(A100))
    lines = out.splitlines()
    assert lines[0].startswith("GPU 0: NVIDIA A100-SXM4-80GB (UUID: ")
    assert lines[1:] == [f"\t Link {n}: 25 GB/s" for n in range(12)]
    errors = run("nvlink -e -i 0", state(A100))[0].splitlines()
    assert errors[1:5] == [
        "\t Link 0: Replay Errors: 0",
        "\t Link 0: Recovery Errors: 0",
        "\t Link 0: CRC Errors: 0",
        "",
    ]
    h800 = GpuHost("gpu-h800-01", "h800", "550.90.07", "gpu_h800")
    assert run("nvlink -s -i 0", state(h800))[0].splitlines()[1:] == [
        f"\t Link {n}: 26.562 GB/s" for n in range(8)
    ]
    l40s = run("nvlink -s -i 0", state(L40S))[0].splitlines()
    assert l40s[1:] == ["Device does not have or support Nvlink"]


def test_query_ecc_shape() -> None:
    out, _ = run("-q -d ECC,ROW_REMAPPER -i 5", state(FAULTY))
    lines = out.splitlines()
    assert lines[1] == "==============NVSMI LOG=============="
    assert "Driver Version                            : 535.161.08" in lines
    # NVIDIA_SMI.md, 535.161.08 -q -d ECC and leptonai/gpud#80 (remapped rows)
    i = lines.index("    ECC Errors")
    assert lines[i + 1 : i + 6] == [
        "        Volatile",
        "            SRAM Correctable              : 0",
        "            SRAM Uncorrectable            : 0",
        "            DRAM Correctable              : 12",
        "            DRAM Uncorrectable            : 3",
    ]
    j = lines.index("    Remapped Rows")
    assert lines[j + 1 : j + 4] == [
        "        Correctable Error                 : 0",
        "        Uncorrectable Error               : 4",
        "        Pending                           : Yes",
    ]


def test_cuda_version_per_branch() -> None:
    pairs = {
        "535.161.08": "12.2",
        "550.90.07": "12.4",
        "570.133.20": "12.8",
        "580.173.02": "13.0",
        "590.48.01": "13.1",
    }
    assert {d: nvsmi.cuda_version(d) for d in pairs} == pairs


def test_load_state_clears_driver_when_module_not_loaded(tmp_path: Path) -> None:
    (tmp_path / "gpus.json").write_text(json.dumps(state(A100)))
    (tmp_path / "mods").write_text("nouveau\n")
    st = nvsmi.load_state(str(tmp_path / "gpus.json"), str(tmp_path / "mods"))
    assert run("", st)[1] == 9
    (tmp_path / "mods").write_text(gpus.loaded_modules("535.161.08"))
    st = nvsmi.load_state(str(tmp_path / "gpus.json"), str(tmp_path / "mods"))
    assert run("", st)[1] == 0


# -- the .run installer -----------------------------------------------------------------------
@pytest.fixture
def host_etc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(installer, "STATE", tmp_path / "gpus.json")
    monkeypatch.setattr(installer, "MODULES", tmp_path / "loaded-modules")
    monkeypatch.setattr(installer, "MODULE_VERSION", tmp_path / "module-version")
    (tmp_path / "headers").mkdir()
    monkeypatch.setattr(installer, "HEADERS", (str(tmp_path / "headers"),))
    monkeypatch.setattr(installer, "LOG", tmp_path / "nvidia-installer.log")
    monkeypatch.setattr(installer, "NOUVEAU_CONF", tmp_path / "modprobe.d" / "nv.conf")
    monkeypatch.setattr(installer.os, "geteuid", lambda: 0)
    (tmp_path / "gpus.json").write_text(json.dumps(gpus.host_state(A100)))
    (tmp_path / "loaded-modules").write_text(gpus.loaded_modules("535.161.08"))
    return tmp_path


def _smi(etc: Path, *args: str) -> tuple[str, int]:
    st = nvsmi.load_state(
        str(etc / "gpus.json"), str(etc / "loaded-modules"), str(etc / "module-version")
    )
    return nvsmi.run(list(args), st)


def test_installer_updates_driver_and_records_flags(host_etc: Path) -> None:
    assert installer.main(["550.90.07", "--silent", "--dkms"]) == 0
    st = json.loads((host_etc / "gpus.json").read_text())
    assert st["driver"] == "550.90.07"
    assert st["install"]["silent"] and st["install"]["dkms"]
    assert "nvidia" in (host_etc / "loaded-modules").read_text().split()


def test_an_upgrade_waits_for_a_reboot(host_etc: Path) -> None:
    assert installer.main(["550.90.07", "--silent", "--dkms"]) == 0
    # the 535 module stays loaded: NVML refuses (NVIDIA_SMI.md: exit 18)
    assert (host_etc / "module-version").read_text() == "535.161.08\n"
    assert _smi(host_etc, "--query-gpu=driver_version", "--format=csv,noheader") == (
        "Failed to initialize NVML: Driver/library version mismatch\n"
        "NVML library version: 550.90\n",
        18,
    )
    # a second upgrade before the reboot still has the first module loaded
    assert installer.main(["570.133.20", "--silent"]) == 0
    assert (host_etc / "module-version").read_text() == "535.161.08\n"
    # back to the loaded version: nothing pending any more
    assert installer.main(["535.161.08", "--silent"]) == 0
    assert not (host_etc / "module-version").exists()
    assert _smi(host_etc, "--query-gpu=driver_version", "--format=csv,noheader")[1] == 0


def test_a_fresh_install_loads_its_module(host_etc: Path) -> None:
    (host_etc / "loaded-modules").write_text("")
    assert installer.main(["550.90.07", "--silent", "--dkms"]) == 0
    assert not (host_etc / "module-version").exists()
    out, rc = _smi(host_etc, "--query-gpu=driver_version", "--format=csv,noheader")
    assert (out.splitlines(), rc) == (["550.90.07"] * 8, 0)


def test_installer_faults(host_etc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = json.loads((host_etc / "gpus.json").read_text())
    (host_etc / "gpus.json").write_text(json.dumps({**st, "install_error": "module-load"}))
    assert installer.main(["550.90.07", "--silent", "--dkms"]) == 1
    assert "ERROR: Unable to load the kernel module 'nvidia.ko'." in capsys.readouterr().err
    assert json.loads((host_etc / "gpus.json").read_text())["driver"] == "535.161.08"


def test_installer_refuses_with_nouveau(host_etc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (host_etc / "loaded-modules").write_text("nouveau\n")
    assert installer.main(["550.90.07", "--silent"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: The Nouveau kernel driver is currently in use by your system.")
    assert "blacklist nouveau" in (host_etc / "modprobe.d" / "nv.conf").read_text()
    assert json.loads((host_etc / "gpus.json").read_text())["driver"] == "535.161.08"


def test_installer_needs_kernel_headers(host_etc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (host_etc / "headers").rmdir()
    assert installer.main(["550.90.07", "--silent", "--dkms"]) == 1
    assert "ERROR: Unable to find the kernel source tree" in capsys.readouterr().err
    assert installer.main(["550.90.07", "--silent", f"--kernel-source-path={host_etc}"]) == 0


def test_driver_run_is_a_shell_script_for_its_version() -> None:
    text = installer.driver_run("570.133.20")
    assert text.startswith("#!/bin/sh\n")
    assert 'exec /usr/bin/python3 -IS - 570.133.20 "$@"' in text
