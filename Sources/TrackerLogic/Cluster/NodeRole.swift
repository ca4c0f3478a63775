/// A role of the node (`Slave`, `Candidate`, `Recovery`, `Master`): a value that owns its
/// fields, sees the rest of the node through a `NodeContext`, and answers what the gate
/// hands it with the role change it asks for, if any. Only the gate makes role changes
/// (`TrackerNode.apply`).
protocol NodeRole {
    /// Time passed: whatever is due.
    mutating func tick(in ctx: inout NodeContext, _ now: Instant) -> RoleChange?
    /// A cluster message that passed the gate's checks.
    mutating func receive(_ env: ClusterEnvelope, in ctx: inout NodeContext, _ now: Instant) -> RoleChange?
    /// An operator's catalogue change the catalogue can take. By default refused at once:
    /// only a master commits it and only a slave knows where to forward it.
    mutating func submit(_ change: CatalogueChange, in ctx: inout NodeContext, _ now: Instant)
    /// A `persistEpoch` reached the disk (a candidate leads once its claim is durable).
    mutating func epochStored(_ epoch: Epoch, in ctx: inout NodeContext) -> RoleChange?
    /// These nodes were heard with a new incarnation: what their earlier run said is void.
    mutating func restarted(_ nodes: [NodeID])
}

extension NodeRole {
    mutating func submit(_ change: CatalogueChange, in ctx: inout NodeContext, _ now: Instant) {
        ctx.refuseForNoMaster(change)
    }

    mutating func epochStored(_ epoch: Epoch, in ctx: inout NodeContext) -> RoleChange? { nil }

    mutating func restarted(_ nodes: [NodeID]) {}

    /// Dispatch by input, then (in `receive`) by message: role → message, as in raft.
    mutating func handle(_ input: RoleInput, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        switch input {
        case .tick:
            return tick(in: &ctx, now)
        case .message(let env):
            return receive(env, in: &ctx, now)
        case .submit(let change):
            submit(change, in: &ctx, now)
            return nil
        case .epochStored(let epoch):
            return epochStored(epoch, in: &ctx)
        case .restarted(let nodes):
            restarted(nodes)
            return nil
        }
    }
}

/// What the gate hands a role.
enum RoleInput {
    /// Time passed: whatever is due.
    case tick
    /// A cluster message that passed the gate's checks (epoch, membership, sender).
    case message(ClusterEnvelope)
    /// An operator's catalogue change the catalogue can take.
    case submit(CatalogueChange)
    /// A `persistEpoch` reached the disk.
    case epochStored(Epoch)
    /// These nodes were heard with a new incarnation: what their earlier run said is void.
    case restarted([NodeID])
}

/// A role asks the gate for another role; the gate makes the change (`TrackerNode.apply`).
enum RoleChange {
    /// Follow this master (a master steps down first) and say hello.
    case follow(NodeID)
    /// Follow the COORDINATOR that announced itself, and answer it with what we hold.
    case acknowledgeCoordinator(NodeID)
    /// Run a bully election (a master steps down first).
    case runElection
    /// The claimed epoch is durable: lead it, recovering first.
    case lead
    /// Recovered: serve as this master, bringing the slaves that answered to our state.
    case serve(Master, syncing: [(node: NodeID, last: TxRef)])
    /// A serving master with no commit of its own heard of this later commit: recover
    /// again, in the same epoch (`MissedCommit.swift`).
    case recoverAgain(missed: TxRef)
}
