/// Strict quorum: a recovering master serves from a branch that a majority of the cluster
/// can vote on. When its own branch cannot gather one and another answer's can, it fetches
/// that branch and merges its own back, as it does with any state it fetched over its own.
///
/// Why: a slave votes OK only on a transaction that follows its own last commit. One whose
/// last commit is not in the master's log is diverged: it offers its repository for a
/// merge and votes "not in sync" until that merge commits, and the merge is a transaction
/// that needs a majority. A strict master of three whose two slaves both hold another
/// branch's #1 therefore commits nothing, for ever: recovery chose the master's own
/// branch because its epoch is the later one, and every PREPARE aborted on two "not in
/// sync" votes (docs/simulator-findings.md).
///
/// The rule: after the most advanced answer was fetched, if we and the answers our log
/// holds are fewer than a majority, the answer whose branch most answers share is fetched
/// instead, when with us they make a majority. Answers whose last commits are of one epoch
/// are on one branch (one master per epoch, and its log is linear once it committed); one
/// holding nothing is on every branch. That count is a lower bound: the branch's own
/// history, once fetched, may show more answers on it.
///
/// Invariant: at most one such fetch per recovery (`Recovery.choseBranch`), and none of
/// the answers is fetched back afterwards for being ahead: what the branch we serve lacks
/// comes back by merge, which keeps the newer record. Nothing acknowledged is lost: our
/// own state stays on disk until its merge commits (`DivergedOnDisk`).
extension Recovery {
    typealias Answer = (node: NodeID, last: TxRef, prepared: Transaction?)

    /// The answer to fetch from when our branch cannot gather a strict majority and its
    /// can; nil to serve from what we hold.
    func majorityBranch(_ answers: [Answer], in ctx: NodeContext) -> Answer? {
        guard ctx.config.quorum == .strict, !choseBranch else { return nil }
        let needed = ctx.majority(of: ctx.config.clusterSize)
        let ours = 1 + answers.filter { ctx.repo.replica.isPrefix($0.last) }.count
        guard ours < needed else { return nil }
        func sharing(_ a: Answer) -> Int {
            1 + answers.filter { $0.last.txid == 0 || ($0.last.epoch == a.last.epoch && $0.last.txid <= a.last.txid) }.count
        }
        let best = answers.filter { !ctx.repo.replica.isPrefix($0.last) }
            .map { (answer: $0, voters: sharing($0)) }
            .max { ($0.voters, $0.answer.last, $1.answer.node) < ($1.voters, $1.answer.last, $0.answer.node) }
        guard let best, best.voters > ours, best.voters >= needed else { return nil }
        return best.answer
    }
}
