"""The example's grader: the offline stand-in judge, unless --factcli-grader (or the ini key
factcli_grader) names a real one. factcli's plugin provides `factcli_grader` and `factcli_cache_dir`;
overriding `factcli_grader` like this is how a project picks its own default judge."""

import pytest
from judge import stand_in_judge

from factcli.testing import Checker
from factcli.testing.plugin import grader_of


@pytest.fixture(scope="session")
def factcli_grader(request, factcli_cache_dir):
    return Checker(grader=grader_of(request.config) or stand_in_judge, cache_dir=factcli_cache_dir)
