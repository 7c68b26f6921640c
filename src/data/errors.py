"""Every error message the data pipeline raises, in one table.

Each message names the config key, the offending value and the fix. Code raises
``DataError(code, **fields)``; the text is ``MESSAGES[code].format(**fields)``, so a test can
assert the exact text of every error from this table alone.
"""
from __future__ import annotations

from typing import Any

MESSAGES: dict[str, str] = {
    # files and downloads
    "missing_file": "data.{key}='{value}': no such file. {fix}",
    "not_a_file": "data.{key}='{value}' is a directory, not a file; {fix}",
    "not_a_directory": "data.{key}='{value}' is a file, not a directory; {fix}",
    "no_files_match": "data.{key}={value} matches no files; give existing text files or globs, e.g. data.{key}=[notes/*.txt]",
    "download_failed": (
        "could not download {what} from {url} ({reason}). Put the file at {dest} or pass data.{key}=/path/to/{filename}; "
        "without internet, data=embedded works offline"
    ),
    "checksum_mismatch": "{path}: sha256 {actual} does not match the expected {expected} for {what}; delete the file and retry, or pass data.{key}= a good copy",
    "bins_missing": (
        "data.dir='{dir}' has no {filename}; run the one-time step first: python -m src.prepare data={name} "
        "(it tokenizes the corpus into train.bin/val.bin there), or point data.dir at a prepared directory"
    ),
    # content
    "undecodable": "{path}: bytes at offset {offset} are not valid {encoding} ({reason}); convert the file to {encoding} or set data.encoding to its encoding",
    "empty_corpus": "data={source}: the {split} split is empty ({detail}); give a corpus with text in it",
    "no_test_split": (
        "data={source}: {dir} has no test split (prepared before every source had one); re-run python -m src.prepare "
        "(or delete the directory to tokenize again): verdicts are read on test, distinct from val"
    ),
    "too_short": (
        "data={source}: the {split} split has {n_tokens} tokens but one window needs block_size+1 = {needed}; "
        "use more text or a smaller block_size (model.max_seq_len)"
    ),
    "too_few_windows": (
        "data={source}: the {split} split has {n_windows} windows of block_size+1 = {needed} tokens, fewer than the "
        "world size {world_size}, so some rank would get none; use more {split} text, a smaller block_size or fewer devices"
    ),
    "too_few_pairs": (
        "data={source}: the {split} split has {n_pairs} pairs, fewer than {needed} ({why}); "
        "use a smaller batch size or fewer devices"
    ),
    "line_count_mismatch": "{src_path} has {src_lines} lines but {tgt_path} has {tgt_lines}; translation files must align line by line",
    "bad_fraction": "data.{key}={value} must be in [0, 1) and the held-out fractions must sum below 1",
    "bad_value": "data.{key}={value!r} is invalid: {fix}",
    # tokenizer / data compatibility
    "tokenizer_mismatch": (
        "{dir} was tokenized with {saved} but the run uses {current}; re-run python -m src.prepare with this tokenizer "
        "or choose tokenizer={saved_name}"
    ),
    "token_out_of_vocab": (
        "{path}: token id {token} at position {index} (byte offset {offset}, {dtype}) is outside the vocabulary "
        "({bound}); the file was written with another tokenizer, or is damaged. Prepare it again with this run's "
        "tokenizer (python -m src.prepare data=<name> tokenizer=<name>), or train with the tokenizer it was written with"
    ),
    "needs_special_tokens": (
        "data={source} needs a tokenizer with eos and pad ids (pair batches end the target with eos and pad on the right); "
        "tokenizer={tokenizer} has eos={eos}, pad={pad}; use tokenizer=gpt2 or tokenizer=hf"
    ),
    "unknown_source": "unknown data source '{name}'; registered sources: {names} (data=<name> picks conf/data/<name>.yaml)",
    "unknown_key": "data={name} got unknown key(s) {unknown}; it accepts: {accepted}",
    "hf_load_failed": (
        "datasets.load_dataset('{path}', {config!r}) failed: {reason}. Offline, pass a local builder and files "
        "(data.path=text data.data_files=...), or a dataset already in the datasets cache; without internet, data=embedded works"
    ),
    "hf_missing_column": "data.text_column='{column}' is not a column of {path} split '{split}'; its columns are {columns}",
}


class DataError(ValueError):
    """A data problem found before training, with its fix. ``code`` keys ``MESSAGES``."""

    def __init__(self, code: str, **fields: Any) -> None:
        self.code = code
        self.fields = fields
        super().__init__(MESSAGES[code].format(**fields))

    def __reduce__(self) -> tuple[Any, ...]:  # picklable: joblib/submitit launchers send a job's error back
        return (_rebuild, (type(self), self.code, self.fields))


def _rebuild(cls: type, code: str, fields: dict[str, Any]) -> DataError:
    return cls(code, **fields)
