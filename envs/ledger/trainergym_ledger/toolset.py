"""The ledger eval tool interface as a verifiers v1 `Toolset`.

The trained model sees exactly these tools at eval time (advertised as `ledger_balance`, ...).
Each rollout gets its own copy of the task's `world` (accounts, fees, overdraft limit), which
the posting tools update, so a job wiring this class into its tasks trains on the same bank.
"""

import verifiers.v1 as vf
from trainergym_kit.toolset import WorldToolset

from trainergym_ledger import bank


class LedgerToolset(WorldToolset):
    TOOL_PREFIX = "ledger"
    MUTABLE_WORLD = True  # each rollout posts to its own copy of the task's books

    @vf.tool
    def balance(self, account: str) -> str:
        """Return the current balance of an account."""
        return bank.balance(self.world, account)

    @vf.tool
    def fees(self) -> str:
        """Return the bank's fee schedule and overdraft limit."""
        return bank.fees(self.world)

    @vf.tool
    def open(self, account: str, amount: int) -> str:
        """Open a new account with a starting amount."""
        return bank.open_account(self.world, account, amount)

    @vf.tool
    def deposit(self, account: str, amount: int) -> str:
        """Deposit an amount into an account (deposits are free)."""
        return bank.deposit(self.world, account, amount)

    @vf.tool
    def withdraw(self, account: str, amount: int) -> str:
        """Withdraw an amount from an account, charging the withdrawal fee; refused if it would pass the overdraft limit."""
        return bank.withdraw(self.world, account, amount)

    @vf.tool
    def transfer(self, source: str, target: str, amount: int) -> str:
        """Move an amount from source to target, charging the transfer fee to source; refused if it would pass the overdraft limit."""
        return bank.transfer(self.world, source, target, amount)


if __name__ == "__main__":
    LedgerToolset.run()
