// Package replica drives one partition of a broker through metadata
// deltas: the composition a broker's applyDelta performs for the
// classic-to-diskless switch, built on tierstate's pure decisions.
//
// A delta is applied in halves, each a pure decision (a Plan of Actions)
// followed by its effects:
//
//	DecideRemoval(delta, holding)    a delta that takes the partition off the
//	                                 broker (a deleted topic, a reassignment
//	                                 away): stop every fetcher, disarm the
//	                                 pruner, stop the remote tasks, delete the
//	                                 logs; nothing else runs
//	DecideCheck(prior, delta)        skip an offline replica; bring a fenced
//	                                 phase-1 leader back; run the phase-2
//	                                 replica check (stop the fetchers, check,
//	                                 recreate: tierstate.CheckAndRecreate)
//	DecideTransition(delta, log)     apply the committed seal (truncate a
//	                                 classic tail, raise a stale high
//	                                 watermark), fence a phase-1 leader below
//	                                 the seal, become leader or follower,
//	                                 start the classic or the consolidation
//	                                 fetcher
//	DecideSwitch(prior, delta, ...)  the leader's switch: seal and propose
//	                                 the seal, create the WAL's row, ask for
//	                                 phase 2; arm or disarm the WAL pruner
//
// Replica owns the current log (and the future log of a log directory
// move) and performs the plans through small interfaces the broker
// implements: LogManager, ClassicFetcher, ConsolidationFetcher,
// RemoteLogManager (*remote.Manager), and optionally
// consolidate.SwitchController with a wal.ControlPlane (the leader's
// switch), PrunerArming (*consolidate.Pruner), MoveFetcher and
// FutureLogManager (log directory moves). ManagedLogs is both log-manager
// interfaces over a *logmanager.Manager.
//
// Hooks complete the switch between deltas: HandOff after each follower
// append (evict at the seal, start consolidation), AdmitAtSeal on the
// leader (ISR admission at the seal), StepSwitch when the leader's high
// watermark or remote copy moved (the seal proposal waits for HW = LEO,
// the phase-2 request for S-1 in remote storage, the pruner's arming for
// a rebuilt log), RetrySealProposal after an unanswered proposal,
// PrunePartition for the broker's Pruner.Run, and MaybePromoteFutureLog
// after each append into a future log. AppendAsLeader is the leader's
// classic produce path behind a consolidate.ClassicGate in the switch
// state of the last delta. Every action is reported to Options.OnEvent
// and logged with the offsets and epochs that led to it.
//
// A broker author thus drives a partition through the whole switch with
// the driver alone (Example_leaderSwitch): Apply each delta, call the
// hooks from the fetchers and the remote log manager's events, and route
// classic produce through AppendAsLeader.
//
// Locking: a Replica holds its lock for a whole delta or hook, across the
// broker's calls, so the broker's implementations must not call back into
// the driver (the controller's answer arrives as a later delta; the hooks
// are called after the fetch a fetcher's RemovePartition waits for, not
// inside it). What it does not do: it runs no fetcher thread, serves no
// fetch, and sends no RPC itself.
package replica
