"""The conformance kit of attnlab over this package's preset."""

import attnlab.testing


@attnlab.testing.parametrize_with_checks(["icl-lsa"])
def test_preset_conforms(name):
    attnlab.testing.check_preset(name)
