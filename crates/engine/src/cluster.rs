//! CLUSTER as Redis 7.0 answers it with cluster support disabled: shoal
//! has no cluster mode (INFO's `cluster_enabled:0`), so every subcommand
//! is refused with Redis's error. The table still names each subcommand
//! with its flags, so that COMMAND, ACL categories and scripts (CLUSTER
//! RESET is not allowed from a script) see what they see in Redis.

use crate::command::{dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::CmdError;

crate::command::group_cmd!("cluster", keys = (0, 0, 0));

/// Redis's reply to any CLUSTER subcommand when cluster mode is off.
const DISABLED: &str = "ERR This instance has cluster support disabled";

#[rustfmt::skip]
const CLUSTER_SUBCOMMANDS: &[Command] = &[
    cmd("cluster|addslots", -3, ADMIN | STALE, "3.0.0", "Assign new hash slots to receiving node", disabled),
    cmd("cluster|addslotsrange", -4, ADMIN | STALE, "7.0.0", "Assign new hash slots to receiving node", disabled),
    cmd("cluster|bumpepoch", 2, ADMIN | STALE, "3.0.0", "Advance the cluster config epoch", disabled),
    cmd("cluster|count-failure-reports", 3, ADMIN | STALE, "3.0.0", "Return the number of failure reports active for a given node", disabled),
    cmd("cluster|countkeysinslot", 3, STALE, "3.0.0", "Return the number of local keys in the specified hash slot", disabled),
    cmd("cluster|delslots", -3, ADMIN | STALE, "3.0.0", "Set hash slots as unbound in receiving node", disabled),
    cmd("cluster|delslotsrange", -4, ADMIN | STALE, "7.0.0", "Set hash slots as unbound in receiving node", disabled),
    cmd("cluster|failover", -2, ADMIN | STALE, "3.0.0", "Forces a replica to perform a manual failover of its master.", disabled),
    cmd("cluster|flushslots", 2, ADMIN | STALE, "3.0.0", "Delete a node's own slots information", disabled),
    cmd("cluster|forget", 3, ADMIN | STALE, "3.0.0", "Remove a node from the nodes table", disabled),
    cmd("cluster|getkeysinslot", 4, STALE, "3.0.0", "Return local key names in the specified hash slot", disabled),
    cmd("cluster|help", 2, LOADING | STALE, "5.0.0", "Show helpful text about the different subcommands", disabled),
    cmd("cluster|info", 2, STALE, "3.0.0", "Provides info about Redis Cluster node state", disabled),
    cmd("cluster|keyslot", 3, STALE, "3.0.0", "Returns the hash slot of the specified key", disabled),
    cmd("cluster|links", 2, STALE, "7.0.0", "Returns a list of all TCP links to and from peer nodes in cluster", disabled),
    cmd("cluster|meet", -4, ADMIN | STALE, "3.0.0", "Force a node cluster to handshake with another node", disabled),
    cmd("cluster|myid", 2, STALE, "3.0.0", "Return the node id", disabled),
    cmd("cluster|nodes", 2, STALE, "3.0.0", "Get Cluster config for the node", disabled),
    cmd("cluster|replicas", 3, ADMIN | STALE, "5.0.0", "List replica nodes of the specified master node", disabled),
    cmd("cluster|replicate", 3, ADMIN | STALE, "3.0.0", "Reconfigure a node as a replica of the specified master node", disabled),
    cmd("cluster|reset", -2, ADMIN | STALE | NOSCRIPT, "3.0.0", "Reset a Redis Cluster node", disabled),
    cmd("cluster|saveconfig", 2, ADMIN | STALE, "3.0.0", "Forces the node to save cluster state on disk", disabled),
    cmd("cluster|set-config-epoch", 3, ADMIN | STALE, "3.0.0", "Set the configuration epoch in a new node", disabled),
    cmd("cluster|setslot", -4, ADMIN | STALE, "3.0.0", "Bind a hash slot to a specific node", disabled),
    cmd("cluster|shards", 2, STALE, "7.0.0", "Get array of cluster slots to node mappings", disabled),
    cmd("cluster|slaves", 3, ADMIN | STALE, "3.0.0", "List replica nodes of the specified master node", disabled),
    cmd("cluster|slots", 2, STALE, "3.0.0", "Get array of Cluster slot to node mappings", disabled),
];

/// The CLUSTER command.
pub(crate) const COMMANDS: &[Command] = &[Command {
    subcommands: CLUSTER_SUBCOMMANDS,
    ..cmd(
        "cluster",
        -2,
        0,
        "3.0.0",
        "A container for cluster commands",
        cluster,
    )
}];

fn cluster(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[0], args)
}

fn disabled(_cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    Err(CmdError::msg(DISABLED))
}
