"""s3:// credentials from profiles of the AWS shared files, end to end on
localhost (the servers, proxy and fixtures of test_s3_credentials.py): a
`credential_process` script named by a config profile, the AWS CLI's order
of keys, process and config keys, and roles of profiles (`role_arn` +
`source_profile`) assumed at moto's STS and at the fake STS, which refuses
an AssumeRole not signed by a key it knows and records who signed each."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

import cairn
from test_s3_credentials import (BUCKET, check_signed_with_issued_credentials, creds, env, fresh,  # noqa: F401
                                 moto, proxy, save_and_restore, wait_until_expired)


def process_script(tmp_path, lifetime: int | None) -> tuple:
    """A credential_process command that hands out key "PROC<n>" (n counts
    its runs, kept in a file) with session token "proc-session-<n>",
    expiring `lifetime` seconds later (never, when None)."""
    counter = tmp_path / "process-runs"
    counter.write_text("0")
    script = tmp_path / "print-credentials.py"
    script.write_text(textwrap.dedent(f"""
        import datetime, json, pathlib, sys
        c = pathlib.Path({str(counter)!r})
        n = int(c.read_text()) + 1
        c.write_text(str(n))
        out = {{"Version": 1, "AccessKeyId": f"PROC{{n}}", "SecretAccessKey": "secret",
               "SessionToken": f"proc-session-{{n}}"}}
        lifetime = {lifetime!r}
        if lifetime is not None:
            t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
            out["Expiration"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        print("a message for the user", file=sys.stderr)
        print(json.dumps(out))
    """))
    return f"{sys.executable} {script}", counter


def test_credential_process_of_a_config_profile_signs_and_is_run_again_before_expiry(env, proxy, tmp_path):
    # Expirations are whole seconds and a refresh starts at half the
    # lifetime: credentials of 20 s stay fresh for about 10 s, enough for the
    # first save and restore on a loaded machine (with 3 s, a refresh during
    # it failed 7 of 10 runs at load 7-9).
    command, runs = process_script(tmp_path, lifetime=20)
    config = tmp_path / "config"
    config.write_text(f"[default]\nregion = us-east-1\n\n[profile tools]\ncredential_process = {command}\n")
    env.setenv("AWS_CONFIG_FILE", str(config))
    env.setenv("AWS_PROFILE", "tools")
    save_and_restore(fresh("process"), 5)
    signed = proxy.signed[:]
    assert signed and all(k == "PROC1" and t == "proc-session-1" for k, t, _ in signed), signed
    # Wait the credentials out: the next save runs the command again.
    time.sleep(20.3)
    n = len(proxy.signed)
    save_and_restore(fresh("process-later"), 6)
    later = {k for k, _, _ in proxy.signed[n:]}
    assert "PROC1" not in later and later <= {f"PROC{i}" for i in range(2, 10)}, later
    assert int(runs.read_text()) >= 2


def test_profile_keys_and_process_in_the_order_of_the_aws_cli(env, proxy, tmp_path):
    """Keys of the credentials file, then credential_process, then keys of
    the config file; a profile neither file has, a failing command and one
    that prints no credentials are clear errors."""
    command, runs = process_script(tmp_path, lifetime=None)
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    env.setenv("AWS_CONFIG_FILE", str(config))
    env.setenv("AWS_PROFILE", "p")

    def signer(name):
        n = len(proxy.signed)
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh(name)}").put("k", b"v")
        keys = {k for k, _, _ in proxy.signed[n:]}
        assert len(keys) == 1, keys
        return keys.pop()

    credentials.write_text("[p]\naws_access_key_id = FILEKEY\naws_secret_access_key = s\n")
    config.write_text(f"[profile p]\ncredential_process = {command}\naws_access_key_id = CONFIGKEY\n"
                      "aws_secret_access_key = s\n")
    assert signer("order-file") == "FILEKEY" and runs.read_text() == "0"
    credentials.write_text("[other]\naws_access_key_id = X\naws_secret_access_key = s\n")
    assert signer("order-process") == "PROC1"
    assert signer("order-process-again") == "PROC1"  # no Expiration: never run again
    config.write_text("[profile p]\naws_access_key_id = CONFIGKEY\naws_secret_access_key = s\n")
    assert signer("order-config") == "CONFIGKEY"

    env.setenv("AWS_PROFILE", "absent")
    with pytest.raises(ValueError, match=f"(?s)`absent`.*{credentials}.*{config}"):
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('absent')}")
    env.setenv("AWS_PROFILE", "p")
    config.write_text("[profile p]\ncredential_process = sh -c 'exit 7'\n")
    with pytest.raises(RuntimeError, match=f"credential_process of {config} \\[p\\].*exited with status 7"):
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('fails')}").put("k", b"v")
    config.write_text("[profile p]\ncredential_process = echo '{\"AccessKeyId\": \"A\"}'\n")
    with pytest.raises(ValueError, match=r"credential_process of .*no `\"Version\": 1`"):
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('no-version')}").put("k", b"v")


def role_profiles(tmp_path, env) -> tuple:
    """Shared files with a long-term key in `base`, role `dev` (source base,
    external id, duration), role `admin` chained on dev, and profiles that
    are wrong in the ways the AWS CLI refuses."""
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    credentials.write_text("[base]\naws_access_key_id = AKIABASE\naws_secret_access_key = base-secret\n")
    config.write_text(textwrap.dedent("""
        [profile dev]
        role_arn = arn:aws:iam::123456789012:role/dev
        source_profile = base
        role_session_name = cairn-dev
        external_id = shared-secret-id
        duration_seconds = 900

        [profile admin]
        role_arn = arn:aws:iam::123456789012:role/admin
        source_profile = dev

        [profile loop-a]
        role_arn = arn:aws:iam::123456789012:role/a
        source_profile = loop-b

        [profile loop-b]
        role_arn = arn:aws:iam::123456789012:role/b
        source_profile = loop-a

        [profile from-ec2]
        role_arn = arn:aws:iam::123456789012:role/x
        credential_source = Ec2InstanceMetadata
    """))
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    env.setenv("AWS_CONFIG_FILE", str(config))
    return credentials, config


def test_role_of_a_profile_assumed_at_moto_sts(env, moto, proxy, tmp_path):
    role_profiles(tmp_path, env)
    env.setenv("AWS_ENDPOINT_URL_STS", moto.endpoint)
    env.setenv("AWS_PROFILE", "dev")
    save_and_restore(fresh("role-moto"), 7)
    keys = {(k, t) for k, t, _ in proxy.signed}
    assert len(keys) == 1, keys  # one set, kept for the 15 minutes asked for
    ((key, session),) = keys
    assert key.startswith("ASIA") and session, keys


def test_roles_are_assumed_signed_by_their_source_chained_and_refreshed(env, proxy, creds, tmp_path):
    role_profiles(tmp_path, env)
    creds.source_keys.add("AKIABASE")
    env.setenv("AWS_ENDPOINT_URL_STS", creds.endpoint)
    env.setenv("AWS_PROFILE", "dev")
    save_and_restore(fresh("role"), 8)
    assert creds.assumed and all(a["signer"] == "AKIABASE" for a in creds.assumed), creds.assumed
    first = creds.assumed[0]
    assert first["role"] == "arn:aws:iam::123456789012:role/dev" and first["session"] == "cairn-dev"
    assert first["external_id"] == "shared-secret-id" and first["duration"] == "900"
    assert {"host", "x-amz-date", "content-type"} <= set(first["signed_headers"].split(";"))
    used = check_signed_with_issued_credentials(proxy, creds)
    assert used <= {a["issued"] for a in creds.assumed}, used
    # Once they expired, the role is assumed again, by the same source key.
    for key in used:
        wait_until_expired(creds, key)
    n, m = len(proxy.signed), len(creds.assumed)
    save_and_restore(fresh("role-later"), 9)
    again = creds.assumed[m:]
    assert again and all(a["signer"] == "AKIABASE" for a in again), again
    later = check_signed_with_issued_credentials(proxy, creds, since=n)
    assert later <= {a["issued"] for a in again} and not (later & used), (later, used)

    # Chained: admin's role is assumed with dev's temporary credentials (and
    # their session token, signed).
    env.setenv("AWS_PROFILE", "admin")
    n, m = len(proxy.signed), len(creds.assumed)
    save_and_restore(fresh("role-chain"), 10)
    chain = creds.assumed[m:]
    dev = {a["issued"] for a in chain if a["role"].endswith("/dev")}
    admin = [a for a in chain if a["role"].endswith("/admin")]
    assert dev and admin and all(a["signer"] == "AKIABASE" for a in chain if a["role"].endswith("/dev"))
    assert all(a["signer"] in dev and "x-amz-security-token" in a["signed_headers"].split(";") for a in admin)
    assert check_signed_with_issued_credentials(proxy, creds, since=n) <= {a["issued"] for a in admin}


def test_role_profile_errors_are_clear(env, proxy, creds, tmp_path):
    credentials, config = role_profiles(tmp_path, env)
    env.setenv("AWS_ENDPOINT_URL_STS", creds.endpoint)
    for profile, pattern in [
            ("loop-a", r"source_profile makes a cycle \(loop-a -> loop-b -> loop-a\)"),
            ("from-ec2", r"credential_source is not supported"),
    ]:
        env.setenv("AWS_PROFILE", profile)
        with pytest.raises(ValueError, match=pattern):
            cairn.kvstore.open(f"s3://{BUCKET}/{fresh(profile)}")
    # STS refuses: the source key is not one it knows.
    env.setenv("AWS_PROFILE", "dev")
    with pytest.raises(RuntimeError) as e:
        cairn.kvstore.open(f"s3://{BUCKET}/{fresh('refused')}").put("k", b"v")
    msg = str(e.value)
    assert "AssumeRole for role arn:aws:iam::123456789012:role/dev" in msg and f"{config} [dev]" in msg, msg
    assert "HTTP 403" in msg and "AccessDenied" in msg and creds.endpoint in msg, msg
