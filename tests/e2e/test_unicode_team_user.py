"""A team named in Chinese on a root agent's node (issue 59, finding 9): its workloads' Unix
user is made by ``useradd`` as ``gp-<hash>`` (user names are ASCII), with the team's own name
in its comment, and a second agent finds it again rather than making another."""

import os
import pwd
import subprocess

import pytest

from gpupool.agent.identity import TenantUsers, unix_name

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making users needs root")
TEAM = "研发部"
PREFIX = "gpu8-"  # a prefix no other test uses: the user is removed afterwards


@pytest.fixture
def team_user():
    name = unix_name(PREFIX, TEAM)
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)


def test_a_chinese_team_gets_a_hashed_unix_user(team_user):
    users = TenantUsers({}, prefix=PREFIX)
    made = users.identity(TEAM)
    entry = pwd.getpwnam(team_user)
    assert made.user == team_user and made.uid == entry.pw_uid and entry.pw_uid != 0
    assert entry.pw_gecos == f"gpupool tenant {TEAM}"
    assert entry.pw_shell.endswith("nologin")
    again = TenantUsers({}, prefix=PREFIX).identity(TEAM)  # another agent, the same user
    assert again == made
