"""Job config.xml: rendered from the library's template (Jinja2, XML-escaped), compared with
what Jenkins holds, and merged into it on update.

gpuops owns only some elements of a job's config.xml; Jenkins and its plugins write the rest
(after a Declarative run, for one). Only the owned elements are compared (``OWNED``), and an
update replaces only those, keeping what Jenkins wrote. Everything else is ignored; the
elements Jenkins is known to write are listed in ``IGNORED`` with why (docs/RELEASES.md too).
"""

from __future__ import annotations

import copy
import difflib
import xml.etree.ElementTree as ET

from gpuops.content import jobs_dir
from gpuops.core.jenkinsjobs import Job, JobsConfig
from gpuops.errors import OperationFailed

TEMPLATE = "pipeline-job.xml.j2"
DECLARATION = "<?xml version='1.1' encoding='UTF-8'?>\n"  # what Jenkins writes

PARAMETERS = "hudson.model.ParametersDefinitionProperty"
NO_CONCURRENT = "org.jenkinsci.plugins.workflow.job.properties.DisableConcurrentBuildsJobProperty"
CHOICE = "hudson.model.ChoiceParameterDefinition"
TRIGGERS = "org.jenkinsci.plugins.workflow.job.properties.PipelineTriggersJobProperty"
#: The scheduled inspection job's kind: its timer trigger is one gpuops owns.
INSPECT = "inspect"
#: The kinds started by their own timer (the agent clean job, the inspection jobs): the timer
#: trigger is an owned property, compared and replaced like the parameters.
SCHEDULED = ("clean", INSPECT)
#: Shown in a diff instead of an authToken's value (a secret).
HIDDEN = "(set, value not shown)"

#: The elements gpuops owns, compared by ``--check`` and replaced by an update (paths from
#: the root, ``flow-definition``, whose name is compared too).
OWNED = {
    "description": "the job's description",
    f"properties/{PARAMETERS}": "the parameters: names, kinds, descriptions, defaults, choices "
    "in order (the rollback choices are the release history)",
    f"properties/{NO_CONCURRENT}": "release, rollback and inspect jobs: one run at a time",
    f"properties/{TRIGGERS} (inspect jobs)": "the inspection's timer trigger (its cron spec, "
    "jenkins.inspect_schedule)",
    "definition": "its class (Pipeline from SCM); scm: its class, userRemoteConfigs (URL, "
    "credentials id), branches; scriptPath; lightweight",
    "authToken": "must be absent: a remote trigger token starts a build with no user cause, "
    "around four eyes (its value is never shown in a diff)",
    "disabled": "must be false or absent: a disabled job cannot release or roll back",
    f"properties/{TRIGGERS}, triggers": "release and rollback jobs only: no triggers (a timer "
    "or SCM trigger would release with no one asking); an empty one is no trigger",
    f"properties/{TRIGGERS} (clean job)": "the agent clean job's timer (its schedule) is "
    "gpuops': compared and replaced like the parameters",
}

#: Known elements Jenkins writes that are not compared, and why. Anything else not in OWNED
#: is ignored too: it is not gpuops' to set.
IGNORED = {
    "actions/*": "Jenkins' own records: DeclarativeJobAction (marks a job that ran a "
    "Declarative Pipeline, never removed), DeclarativeJobPropertyTrackerAction and "
    "workflow-multibranch's JobPropertyTrackerAction (which properties the last run's "
    "Jenkinsfile set), Blue Ocean's BlueOceanUrlAction",
    "properties/* (other)": "set by the Jenkinsfile's options {} on each run "
    "(BuildDiscarderProperty, DurabilityHintJobProperty, ...) or by plugins and "
    "administrators; on the build job also DisableConcurrentBuilds and the triggers "
    "(PipelineTriggersJobProperty, legacy triggers) its Jenkinsfile's triggers {} sets",
    f"properties/{NO_CONCURRENT}/abortPrevious=false": "the default Jenkins writes into it",
    "@plugin": "the plugin and its version that wrote an element: changes with every upgrade",
    "keepDependencies, displayName, quietPeriod": "Jenkins core's fields with their defaults",
    "definition/scm: configVersion, doGenerateSubmoduleConfigurations, submoduleCfg, "
    "extensions": "the git plugin's own fields and defaults, which vary with its version",
    "formatting": "the XML declaration, indentation, <x/> versus <x></x>, the order of "
    "properties, a parameter's description or default missing versus empty",
}

_SCM_OWNED = ("userRemoteConfigs", "branches")
_DEFINITION_OWNED = ("scriptPath", "lightweight")
_EMPTY_MEANS_MISSING = ("description", "defaultValue")


def render(job: Job, config: JobsConfig) -> str:
    import jinja2  # noqa: PLC0415 - only for gpuops jenkins

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(jobs_dir())),
        autoescape=True,  # every value is XML-escaped
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(TEMPLATE).render(job=job, config=config)


def _parse(config_xml: str, what: str) -> ET.Element:
    try:
        return ET.fromstring(config_xml.encode())  # noqa: S314 - Jenkins' or our own config.xml
    except ET.ParseError as exc:
        raise OperationFailed(f"{what}: config.xml is not well-formed XML ({exc})") from None


def _owned_properties(kind: str) -> tuple[str, ...]:
    if kind == "build":
        return (PARAMETERS,)
    if kind in SCHEDULED:  # its timer trigger is gpuops': compared and replaced
        return (PARAMETERS, NO_CONCURRENT, TRIGGERS)
    return (PARAMETERS, NO_CONCURRENT)


def _default_field(parent: ET.Element, child: ET.Element) -> bool:
    """An empty optional field (Jenkins omits a null one), or abortPrevious=false."""
    if child.tag in _EMPTY_MEANS_MISSING:
        return not (child.text or "").strip() and not len(child)
    return (
        parent.tag == NO_CONCURRENT
        and child.tag == "abortPrevious"
        and (child.text or "").strip() == "false"
    )


def _tidy(element: ET.Element) -> ET.Element:
    """A copy without plugin attributes and blank text, empty optional fields dropped."""
    out = copy.deepcopy(element)
    for e in out.iter():
        e.attrib.pop("plugin", None)
        if e.text is not None and not e.text.strip():
            e.text = None
        e.tail = None
        for child in [c for c in e if _default_field(e, c)]:
            e.remove(child)
    for choice in out.iter(CHOICE):  # the choice list in the template's form, whatever form
        old = choice.find("choices")
        if old is not None:
            strings = [s.text or "" for s in old.iter("string")]
            new = ET.Element("choices", {"class": "java.util.Arrays$ArrayList"})
            array = ET.SubElement(new, "a", {"class": "string-array"})
            for s in strings:
                ET.SubElement(array, "string").text = s
            choice.insert(list(choice).index(old), new)
            choice.remove(old)
    return out


def owned(config_xml: str, kind: str, what: str) -> ET.Element:
    """Only the elements gpuops owns, normalised: what ``--check`` compares."""
    root = _parse(config_xml, what)
    out = ET.Element(root.tag)
    ET.SubElement(out, "description").text = root.findtext("description") or None
    props = ET.SubElement(out, "properties")
    wanted = _owned_properties(kind)
    found = root.find("properties")
    mine = [p for p in (found if found is not None else []) if p.tag in wanted]
    for p in sorted(mine, key=lambda e: e.tag):  # their order in Jenkins is not meaningful
        props.append(_tidy(p))
    definition = root.find("definition")
    if definition is not None:
        d = ET.SubElement(out, "definition", {"class": definition.get("class", "")})
        scm = definition.find("scm")
        if scm is not None:
            s = ET.SubElement(d, "scm", {"class": scm.get("class", "")})
            for tag in _SCM_OWNED:
                s.extend(_tidy(e) for e in scm.findall(tag))
        for tag in _DEFINITION_OWNED:
            d.extend(_tidy(e) for e in definition.findall(tag))
        if definition.get("class") != "org.jenkinsci.plugins.workflow.cps.CpsScmFlowDefinition":
            d.extend(_tidy(e) for e in definition if e.tag not in ("scm", *_DEFINITION_OWNED))
    _gate(root, out, kind)
    for e in out.iter():
        if e.text is not None and not e.text.strip():
            e.text = None
    ET.indent(out)
    return out


def _has_triggers(element: ET.Element | None) -> bool:
    """A triggers list (or a PipelineTriggersJobProperty) with any trigger in it."""
    if element is None:
        return False
    found = element.find("triggers") if element.tag == TRIGGERS else element
    return found is not None and len(found) > 0


def _gate(root: ET.Element, out: ET.Element, kind: str) -> None:
    """What would weaken the release gate, added to ``out`` only when present: an authToken
    (its value hidden), disabled true, and on release/rollback jobs any trigger."""
    if root.find("authToken") is not None:
        ET.SubElement(out, "authToken").text = HIDDEN
    disabled = (root.findtext("disabled") or "false").strip()
    if disabled != "false":
        ET.SubElement(out, "disabled").text = disabled
    if kind == "build":
        return
    props = root.find("properties")
    for p in props.findall(TRIGGERS) if props is not None and kind not in SCHEDULED else []:
        if _has_triggers(p):
            out.append(_tidy(p))
    legacy = root.find("triggers")
    if _has_triggers(legacy):
        out.append(_tidy(legacy))  # type: ignore[arg-type]


def _text(root: ET.Element) -> str:
    return ET.tostring(root, encoding="unicode")


def drift(current: str | None, wanted: str, kind: str, path: str) -> str:
    """What differs, as a unified diff from Jenkins to what is wanted: of the owned elements
    when the job exists (empty: no drift), of the whole wanted config.xml when it does not."""
    if current is None:
        old: list[str] = []
        root = _parse(wanted, path)
        for e in root.iter():
            e.tail = None
            if e.text is not None and not e.text.strip():
                e.text = None
        ET.indent(root)
        new = _text(root).splitlines()
    else:
        old = _text(owned(current, kind, f"{path} (Jenkins)")).splitlines()
        new = _text(owned(wanted, kind, path)).splitlines()
        if old == new:
            return ""
    return "\n".join(
        difflib.unified_diff(old, new, f"{path} (Jenkins)", f"{path} (wanted)", lineterm="")
    )


def merged(current: str, wanted: str, kind: str, path: str) -> str:
    """Jenkins' config.xml with the owned elements replaced by the wanted ones: what an
    update sends, so that what Jenkins and its plugins wrote stays."""
    root = _parse(current, f"{path} (Jenkins)")
    want = _parse(wanted, path)
    if root.tag != want.tag:  # another kind of job: only ours can replace it
        return wanted
    _replace(root, want, "description", _after(root, "actions"))
    props = root.find("properties")
    if props is None:
        props = ET.Element("properties")
        root.insert(_after(root, "description"), props)
    owned_tags = _owned_properties(kind)
    at = next((i for i, p in enumerate(props) if p.tag in owned_tags), len(props))
    for p in [p for p in props if p.tag in owned_tags]:
        props.remove(p)
    want_props = want.find("properties")
    ours = [] if want_props is None else [p for p in want_props if p.tag in owned_tags]
    for offset, p in enumerate(ours):
        props.insert(at + offset, copy.deepcopy(p))
    _merge_definition(root, want)
    _reset_gate(root, kind)
    ET.indent(root, space="  ")
    return DECLARATION + _text(root) + "\n"


def _reset_gate(root: ET.Element, kind: str) -> None:
    """On update: no authToken, not disabled; on release/rollback jobs no trigger."""
    for token in root.findall("authToken"):
        root.remove(token)
    for disabled in root.findall("disabled"):
        disabled.text = "false"
    if kind == "build":
        return
    props = root.find("properties")
    for p in props.findall(TRIGGERS) if props is not None and kind not in SCHEDULED else []:
        props.remove(p)  # type: ignore[union-attr]
    legacy = root.find("triggers")
    if legacy is not None:
        for child in list(legacy):
            legacy.remove(child)
        legacy.text = None


def _after(root: ET.Element, tag: str) -> int:
    tags = [e.tag for e in root]
    return tags.index(tag) + 1 if tag in tags else 0


def _replace(parent: ET.Element, source: ET.Element, tag: str, default_at: int) -> None:
    new = source.find(tag)
    old = parent.find(tag)
    if new is None:
        return
    if old is None:
        parent.insert(default_at, copy.deepcopy(new))
    else:
        parent.insert(list(parent).index(old), copy.deepcopy(new))
        parent.remove(old)


def _merge_definition(root: ET.Element, want: ET.Element) -> None:
    old, new = root.find("definition"), want.find("definition")
    if new is None:
        return
    old_scm = old.find("scm") if old is not None else None
    new_scm = new.find("scm")
    same_kind = (
        old is not None
        and old.get("class") == new.get("class")
        and old_scm is not None
        and new_scm is not None
        and old_scm.get("class") == new_scm.get("class")
    )
    if not same_kind or old is None or old_scm is None or new_scm is None:
        _replace(root, want, "definition", len(root))
        return
    for tag in _SCM_OWNED:
        _replace(old_scm, new_scm, tag, len(old_scm))
    for tag in _DEFINITION_OWNED:
        _replace(old, new, tag, len(old))
