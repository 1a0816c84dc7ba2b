"""Text renderings of image builds, tag moves, inspections and the CUDA gate. Decide nothing."""

from __future__ import annotations

from typing import Any

from gpuops.core.imagerecord import OCI_KEYS, BuildRecord

#: Node rows a compat table shows beyond the refused ones (all are in the JSON result).
MAX_ROWS = 40


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def build_summary(record: BuildRecord) -> str:
    lines = [f"image      {record.image}"]
    lines += [f"tag        {t}" for t in record.tags]
    lines.append(f"digest     {record.digest or '(not pushed)'}")
    lines.append(f"base       {record.base_image}")
    lines.append(f"cuda       {record.cuda_version} ({record.cuda_source})")
    lines.append(
        f"size       {_size(record.size_bytes)} in the registry, "
        f"{_size(record.local_size_bytes)} local"
    )
    lines.append(f"steps      {record.steps} ({record.cached_steps} from cache)")
    lines.append("timings    " + ", ".join(f"{k} {v:.1f}s" for k, v in record.timings_s.items()))
    if record.cleanup is not None:
        lines.append(
            f"cleanup    removed {len(record.cleanup['removed'])}, "
            f"kept {len(record.cleanup['kept'])}"
        )
    return "\n".join(lines)


def tag_move(data: dict[str, Any]) -> str:
    reqs = ", ".join(f"{n} {k}" for k, n in data["requests"].items())
    extra = ""
    if data["mounted_blobs"] or data["copied_manifests"]:
        extra = f"; mounted {data['mounted_blobs']} blob(s), {data['copied_manifests']} manifest(s)"
    return (
        f"{data['message']}\n{data['media_type']}; {reqs}{extra}; {data['elapsed_s'] * 1000:.0f} ms"
    )


def inspection(data: dict[str, Any]) -> str:
    lines = [
        f"reference  {data['reference']}",
        f"digest     {data['digest']}",
        f"type       {data['media_type']}",
    ]
    for p in data["platforms"]:
        lines.append(f"platform   {p['platform']:<16} {p['digest']}")
    if data["platforms"]:
        lines.append(f"described  {data['platform']} ({data['manifest_digest']})")
    elif data["platform"]:
        lines.append(f"platform   {data['platform']}")
    lines.append(f"cuda       {data['cuda_version']} ({data['cuda_source']})")
    lines.append(f"size       {_size(data['size_bytes'])} ({data['layers']} layers)")
    lines.append(f"created    {data['created'] or '-'}")
    labels = data["labels"]
    for key in [k for k in OCI_KEYS if k in labels] + [k for k in labels if k not in OCI_KEYS]:
        lines.append(f"label      {key}={labels[key]}")
    return "\n".join(lines)


def compat_table(data: dict[str, Any]) -> str:
    lines = [
        f"image {data['image'] or '-'}: CUDA {data['cuda_version']} ({data['cuda_source']}); "
        f"class {','.join(f'{k}={v}' for k, v in data['node_selector'].items())}"
    ]
    if data.get("requirement"):
        req = data["requirement"]
        lines.append(
            f"needs driver >= {data['min_driver'] or '?'}"
            + (
                ""
                if data["strict"]
                else f" (minor-version compatibility; {req['table_row']}: "
                f"{req['full_min_driver'] or 'not in the table'} for full support)"
            )
        )
    lines.append(f"{'NODE':<28} {'DRIVER':<12} {'VERDICT':<14} WHY")
    refused = [n for n in data["nodes"] if n["node"] in set(data["offending"])]
    passed = [n for n in data["nodes"] if n["node"] not in set(data["offending"])]
    shown = refused + passed[: max(0, MAX_ROWS - len(refused))]
    for n in shown:  # every refused node, then passing ones up to MAX_ROWS
        lines.append(
            f"{n['node']:<28} {n.get('driver') or '-':<12} {n['verdict']:<14} {n.get('reason', '')}"
        )
    if len(shown) < len(data["nodes"]):
        lines.append(f"... {len(data['nodes']) - len(shown)} more nodes (see --output json)")
    lines.append("drivers: " + ", ".join(f"{d['driver']} ({d['nodes']})" for d in data["drivers"]))
    lines.append(data["message"])
    return "\n".join(lines)


def clean_summary(data: dict[str, Any]) -> str:
    """``image clean``: what went, what was refused, what of ours stayed, the space freed."""
    lines = [
        f"daemon     {data['daemon']} ({data['mode']}{', dry run' if data['dry_run'] else ''})"
    ]
    verb = "would remove" if data["dry_run"] else "removed"
    for e in data["removed"]:
        lines.append(f"{verb:<10} {e['id']} {' '.join(e['tags']) or '(untagged)'}: {e['reason']}")
    for e in data["refused"]:
        lines.append(f"refused    {e['id']} {' '.join(e['tags']) or '(untagged)'}: {e['reason']}")
    for e in data["kept"]:
        lines.append(f"kept       {e['id']} {' '.join(e['tags']) or '(untagged)'}: {e['reason']}")
    if data["mode"] == "labelled":
        lines.append(f"others     {data['other_images']} image(s) not built by gpuops, left alone")
    space = data["space"]
    lines.append(
        f"space      {_size(space['before_bytes'])} before"
        + (
            f", {_size(space['after_bytes'])} after: freed {_size(space['freed_bytes'])}"
            if space["after_bytes"] is not None
            else ""
        )
        + f" ({space['measured_by']})"
    )
    lines.append(data["message"])
    return "\n".join(lines)


def prune_summary(data: dict[str, Any]) -> str:
    """Per repository: what is deleted (or would be) and why each kept manifest stays."""
    dry = data.get("dry_run")
    lines = []
    for repo in data.get("repositories") or []:
        decisions = repo.get("decisions") or []
        doomed = [d for d in decisions if d["action"] == "delete"]
        lines.append(
            f"{repo['repository']}  ({', '.join(repo['environments'])}): {repo['tags']} tags, "
            f"{len(decisions)} manifests, {len(doomed)} "
            + ("would be deleted" if dry else f"to delete, {len(repo['deleted'])} deleted")
        )
        for d in decisions:
            tags = ",".join(d["tags"]) or "(untagged)"
            word = "DELETE" if d["action"] == "delete" else "keep  "
            why = "" if d["action"] == "delete" else "  " + "; ".join(d["reasons"])
            lines.append(f"  {word} {d['digest'][:19]} {tags}{why}")
    lines.append(
        f"state {data.get('state')}: {data.get('deleted', 0)} deleted, {data.get('kept', 0)} "
        f"kept; locks {', '.join(data.get('locks') or []) or 'none'}"
    )
    return "\n".join(lines)


def gc_summary(data: dict[str, Any]) -> str:
    if not data.get("collected"):
        return f"registry {data.get('registry')}: garbage-collect not run ({data.get('config')})"
    return (
        f"garbage-collect ({data.get('registry')} registry, delete-untagged "
        f"{'on' if data.get('delete_untagged') else 'off'}): {data.get('blobs_deleted')} "
        f"blobs deleted; {_size(data.get('bytes_freed'))} freed on disk "
        f"({_size(data.get('bytes_before'))} -> {_size(data.get('bytes_after'))} under "
        f"{data.get('root')})"
    )
