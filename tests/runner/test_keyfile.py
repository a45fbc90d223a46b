"""The claim-key file: written 0600 in a 0700 directory, never used when others can read it."""

from __future__ import annotations

import os
import stat

from runner import keyfile

SERVER = "http://agents.example:8000"


def test_a_saved_key_is_readable_only_by_its_user_and_loads_back(tmp_path):
    path = keyfile.key_path(tmp_path / "keys", server=SERVER, target_id="tgt_1")
    keyfile.save(path, server=SERVER + "/", target_id="tgt_1", key="tgtk_abc")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert keyfile.load(path, server=SERVER, target_id="tgt_1") == "tgtk_abc"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_a_key_file_others_can_read_is_not_used(tmp_path):
    path = keyfile.key_path(tmp_path, server=SERVER, target_id="tgt_1")
    keyfile.save(path, server=SERVER, target_id="tgt_1", key="tgtk_abc")
    os.chmod(path, 0o644)
    assert keyfile.load(path, server=SERVER, target_id="tgt_1") is None


def test_a_key_for_another_server_or_machine_is_not_used(tmp_path):
    path = keyfile.key_path(tmp_path, server=SERVER, target_id="tgt_1")
    keyfile.save(path, server=SERVER, target_id="tgt_1", key="tgtk_abc")
    assert keyfile.load(path, server="http://elsewhere", target_id="tgt_1") is None
    assert keyfile.load(path, server=SERVER, target_id="tgt_2") is None
    assert keyfile.key_path(tmp_path, server="http://elsewhere", target_id="tgt_1") != path


def test_a_missing_or_corrupt_file_loads_nothing(tmp_path):
    path = keyfile.key_path(tmp_path, server=SERVER, target_id="tgt_1")
    assert keyfile.load(path, server=SERVER, target_id="tgt_1") is None
    path.write_text("{not json")
    os.chmod(path, 0o600)
    assert keyfile.load(path, server=SERVER, target_id="tgt_1") is None


def test_saving_again_replaces_the_key(tmp_path):
    path = keyfile.key_path(tmp_path, server=SERVER, target_id="tgt_1")
    keyfile.save(path, server=SERVER, target_id="tgt_1", key="tgtk_old")
    keyfile.save(path, server=SERVER, target_id="tgt_1", key="tgtk_new")
    assert keyfile.load(path, server=SERVER, target_id="tgt_1") == "tgtk_new"
