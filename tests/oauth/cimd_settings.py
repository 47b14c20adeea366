"""Settings of the live server in the metadata-document flow test: the test settings, plus the
CA of the test's loopback document server, which only this module reads from the environment
(connect/settings.py never does)."""

import os

from tests.settings import *  # noqa: F403

CONNECT_CIMD_TESTING_CA_FILE = os.environ["CONNECT_TEST_CIMD_CA_FILE"]
