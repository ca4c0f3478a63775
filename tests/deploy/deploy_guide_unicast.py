#!/usr/bin/python3
"""docs/operating/deploy.md's variant for networks that drop multicast, run as written:
the switch drops every multicast frame, keepalived speaks VRRP over unicast, the nodes'
keepalives travel on the broker alone (`deploy_guide.run_unicast`)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_guide  # noqa: E402

if __name__ == "__main__":
    deploy_guide.main(unicast=True)
