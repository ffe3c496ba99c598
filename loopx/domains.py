"""The installed domains, in fold order: the composition root the kernel loads at first use.

Each record is folded (and checked) by the lanes first, then governance, research and the
narrator, so a later domain reads what an earlier one folded from the same record (research's
plan versions follow the contract version governance appended). Bump :data:`FOLD_VERSION`
whenever any domain's fold handlers change meaning: checkpoints of another version are rebuilt.
"""

from __future__ import annotations

from loopx.governance.domain import DOMAIN as GOVERNANCE
from loopx.kernel.domains import Domains
from loopx.narrator.domain import DOMAIN as NARRATOR
from loopx.research.domain import DOMAIN as RESEARCH
from loopx.work.domain import DOMAIN as WORK

FOLD_VERSION = 21
# The write rules' version: 2 adds the contract's named protected scope and allowed paths,
# duplicates by fingerprint, the novelty material rules and the claim packet's fields; 3 keeps
# the campaign's error control from loosening once its held-out family has begun; 4 fixes the
# comparison and keeps the guardrails from loosening once evidence exists, keeps the held-out
# data out of the dev data's location, and measures the baseline on held-out data once per seeds;
# 5 counts a seed once, in a packet and in a judgement; 6 measures the campaign's improvement
# (so its stop policy) against the baseline values the promotion was judged against; and 7
# holds the measured baseline's compared packets to the protected boundary gate and to their
# executor's validity flag; 8 fixes one base commit per campaign, which every scored packet
# starts from and the measured baseline runs unchanged; 9 has the contract pin that commit
# before any scored packet may cite one, so that no executor's packet chooses it; 10 has the
# protected boundary gate check that held-out runs evaluated the code dev screened; 11 has it
# check that the evaluated code holds no change another hypothesis' packet evaluated first
# (loopx.kernel.rules says how a log keeps verifying under the rules it was written by).
RULES_VERSION = 11
DOMAINS = Domains((WORK, GOVERNANCE, RESEARCH, NARRATOR), version=FOLD_VERSION,
                  rules=RULES_VERSION)
