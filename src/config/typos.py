"""A misspelt key or group option on the command line: one message from this project with the
closest accepted names, before Hydra's own advice.

For ``model.norm_placment=post`` Hydra says "Could not override 'model.norm_placment'. To append to
your config use +model.norm_placment=post": wrong advice for a key that exists under another
spelling (following it gets a second error from this project's validation). For
``model/position=rotary`` it lists every option, without saying which was meant (``ALIASES``
maps the names papers use to this project's: rotary is ``rope``).

``check_command_line`` (called by the entry points before ``@hydra.main`` runs) composes the
config once with the command line's overrides (a sweep's first value of each swept key) through
Hydra's compose API. When composition fails on a key that is not in the config, or on a group
option that does not exist, and a close accepted name exists, it exits with status 1 and one line::

    ConfigError: model.norm_placment is not a key of model (did you mean model.norm_placement?);
    fix the spelling

Anything else (no close name, another error, composition that succeeds) is left to Hydra and to the
run's own validation (src/config/validate.py), so nothing is refused here that Hydra accepts. A
command line with ``--config-path``/``--config-dir``/``--config-name`` is left alone. Costs one
composition (~0.3 s).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from src.errors import did_you_mean

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
_CONFIG_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
_VALUE_FLAGS = ("--experimental-rerun", "--info", "-i")
_NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'")
_MISSING_OPTION = re.compile(r"Could not find '([^']+)'")


#: names a reader may know a group's option by, from papers and other code, and the option's
#: name here: the did-you-mean that spelling distance cannot find
ALIASES: dict[str, dict[str, str]] = {
    "model/position": {
        "rotary": "rope",
        "absolute": "learned",
        "nope": "none",
        "t5": "t5_bias",
        "relative": "t5_bias",
        "sin": "sinusoidal",
    },
    "model/norm": {"ln": "layernorm", "layer_norm": "layernorm", "rms": "rmsnorm"},
    "model/qk_norm": {"ln": "layernorm", "layer_norm": "layernorm", "rms": "rmsnorm"},
    "model/ffn": {"mlp": "gelu", "swish": "silu"},
    "model/mask": {"bidirectional_lm": "bidirectional", "prefix": "prefix_lm"},
    "optim": {"adam": "adamw", "schedule_free": "schedulefree"},
    "scheduler": {"cos": "cosine", "rsqrt": "inverse_sqrt", "trapezoidal": "wsd"},
}


#: keys an entry point renamed: (entry point's config, old key) -> the key that replaced it
RENAMED: dict[tuple[str, str], str] = {
    ("eval", "tasks"): "benchmarks",
    ("train", "task"): "objective",
}


class MisspeltOverride(SystemExit):
    """Exits with status 1 and the message (raised before Hydra starts, where no ``clean_errors``
    runs)."""


def command_line_overrides(argv: Sequence[str]) -> list[str] | None:
    """The ``key=value`` overrides of an entry point's argv; None when a config flag makes the
    search path or the primary config differ from the entry point's own."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg.split("=", 1)[0] in _CONFIG_FLAGS:
            return None
        if arg in _VALUE_FLAGS:
            skip = True
            continue
        if arg.startswith("-") or "=" not in arg:
            continue
        out.append(arg)
    return out


def composable(overrides: Sequence[str]) -> list[str] | None:
    """Each override with a sweep replaced by its first value; Hydra's own overrides dropped. None
    when one does not parse (Hydra reports that itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # a syntax error: Hydra's message is the right one
        return None
    out: list[str] = []
    for o in parsed:
        if o.key_or_group.startswith(("hydra.", "hydra/")) or o.key_or_group == "hydra":
            continue
        if o.is_sweep_override():
            # choice and range sweeps enumerate; an interval (Optuna's) does not: nothing to compose
            try:
                first = next(iter(o.sweep_string_iterator()), None)
            except Exception:
                return None
            if first is None:
                return None
            out.append(f"{o.get_key_element()}={first}")
        else:
            out.append(str(o.input_line))
    return out


def misspelling(config_name: str, overrides: Sequence[str]) -> str | None:
    """The message for the first misspelt key or group option that has a close accepted name, else
    None."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return None  # inside a running Hydra app (tests, a sweep job): nothing to check here
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        try:
            compose(config_name=config_name, overrides=list(overrides))
            return None
        # ConfigCompositionException / MissingConfigException: read their message
        except Exception as e:
            text = f"{e} {e.__cause__ or ''}"
        found = _NOT_IN_STRUCT.search(text)
        if found:
            return _misspelt_key(config_name, overrides, found.group(1), compose)
        found = _MISSING_OPTION.search(text)
        if found:
            return _misspelt_option(found.group(1))
    return None


def _chosen(node: DictConfig, group: str) -> str:
    """``scheduler=cosine``: the group and its chosen option (the node's ``name``), for a
    message."""
    name = node.get("name") if isinstance(node, DictConfig) else None
    return f"{group}={name}" if name else group


def _options_with_key(group: str, leaf: str) -> list[str]:
    """The options of config group ``group`` (``conf/<group>/*.yaml``) whose file sets ``leaf``."""
    import yaml

    folder = CONF_DIR / group
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            node = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            continue
        if isinstance(node, dict) and leaf in node:
            found.append(path.stem)
    return found


def _key_of_another_option(full_key: str, node: DictConfig) -> str | None:
    """``scheduler.decay_from`` with ``scheduler=cosine``: the message naming the options that have
    the key, else None."""
    group, _, leaf = full_key.rpartition(".")
    owners = _options_with_key(group, leaf) if group else []
    if not owners:
        return None
    chosen = _chosen(node, group)
    choose = " or ".join(f"{group}={o}" for o in owners)
    return (
        f"ConfigError: {full_key} is not a key of {chosen}: it belongs to {choose}; choose "
        f"{choose if len(owners) == 1 else 'one of them'} on the command line, or remove the "
        f"{full_key} override"
    )


def _misspelt_key(
    config_name: str, overrides: Sequence[str], full_key: str, compose: object
) -> str | None:
    parent, _, leaf = full_key.rpartition(".")
    rest = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split("@", 1)[0] != full_key]
    try:
        cfg = compose(config_name=config_name, overrides=rest)  # type: ignore[operator]
    except Exception:
        return None  # a second problem: Hydra reports the first
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if not isinstance(node, DictConfig):
        return None
    hint = did_you_mean(leaf, [str(k) for k in node.keys()], prefix=f"{parent}." if parent else "")
    if not hint:
        # a key of another option of the group (scheduler.decay_from is wsd's), else maybe a new
        # key, and Hydra's "+key" advice is right
        return _key_of_another_option(full_key, node)
    where = f"a key of {parent}" if parent else "a top-level key"
    return f"ConfigError: {full_key} is not {where}{hint}; fix the spelling"


def _misspelt_option(path: str) -> str | None:
    group, _, name = path.rpartition("/")
    folder = CONF_DIR / group
    if not group or not folder.is_dir():
        return None
    options = sorted(p.stem for p in folder.glob("*.yaml"))
    alias = ALIASES.get(group, {}).get(name.lower())
    hint = f" (did you mean {alias}?)" if alias in options else did_you_mean(name, options)
    if not hint:
        return None
    return (
        f"ConfigError: {group}={name} is not an option of {group}{hint}; the options: "
        f"{', '.join(options)}"
    )


def swept_option_misspelling(overrides: Sequence[str]) -> str | None:
    """A misspelt value among a swept group's options (``model/position=learned,rpoe``: composition
    sees the first value only)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for o in OverridesParser.create().parse_overrides(list(overrides)):
        if o.is_sweep_override() and (CONF_DIR / o.key_or_group).is_dir():
            try:
                values = list(o.sweep_string_iterator())
            except Exception:  # not an enumerable sweep
                continue
            for value in values:
                if not (CONF_DIR / o.key_or_group / f"{value}.yaml").is_file():
                    message = _misspelt_option(f"{o.key_or_group}/{value}")
                    if message:
                        return message
    return None


def swept_key_missing(config_name: str, overrides: Sequence[str]) -> str | None:
    """A key an experiment sweeps (its ``hydra.sweeper.params``) that the option the command line
    picks does not have (``-m experiment=study_norm scheduler=none``: the experiment sweeps
    ``scheduler.warmup_steps``): every job would stop on Hydra's "not in struct"."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return None
    typed = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None) or {}
    experiment = OmegaConf.select(cfg, "hydra.runtime.choices.experiment", default=None)
    for key in params:
        key = str(key)
        if key in typed or key.startswith("+") or "/" in key or (CONF_DIR / key).is_dir():
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig) or leaf in node:
            continue
        owners = _options_with_key(parent, leaf) if parent else []
        have = f" ({', '.join(f'{parent}={o}' for o in owners)} have it)" if owners else ""
        return (
            f"ConfigError: experiment={experiment} sweeps {key} (its hydra.sweeper.params), which "
            f"{_chosen(node, parent)} does not have{have}: every job would fail on it. Keep a "
            f"{parent} that has it, or run the experiment without -m"
        )
    return None


def check_command_line(config_name: str, argv: Sequence[str]) -> None:
    """Exit with one clear line when the command line misspells a key or a group option (module
    doc)."""
    if os.environ.get("LOCAL_RANK") not in (None, "0"):
        return  # a DDP rank > 0 started by the launcher: rank 0 checked this command line
    overrides = command_line_overrides(argv)
    if not overrides:
        return
    message = renamed_key(config_name, overrides)
    if message is not None:
        raise MisspeltOverride(message)
    plain = composable(overrides)
    if plain is None:
        return
    try:
        message = swept_option_misspelling(overrides) or misspelling(config_name, plain)
        if message is None and ("-m" in argv or "--multirun" in argv):
            message = swept_key_missing(config_name, plain)
    # a check that cannot run must not stop a command Hydra would accept: Hydra reports
    except Exception:
        return
    if message is not None:
        raise MisspeltOverride(message)


def renamed_key(config_name: str, overrides: Sequence[str]) -> str | None:
    """The message for an override of a key this entry point renamed (``RENAMED``), else None."""
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        for (config, old), new in RENAMED.items():
            if config == config_name and (key == old or key.startswith(old + ".")):
                return (
                    f"ConfigError: {key}= is {new + key[len(old) :]}= now; write "
                    f"{override.lstrip('+~').replace(old, new, 1)}"
                )
    return None
