// Package replica drives one partition of a broker through metadata
// deltas: the composition a broker's applyDelta performs for the
// classic-to-diskless switch, built on tierstate's pure decisions.
//
// A delta is applied in two halves, each a pure decision (a Plan of
// Actions) followed by its effects:
//
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
//
// Replica owns the current log (and the future log of a log directory
// move) and performs the plans through small interfaces the broker
// implements: LogManager, ClassicFetcher, ConsolidationFetcher and
// RemoteLogManager (*remote.Manager). Two fetch hooks complete the
// switch: HandOff after each follower append (evict at the seal, start
// consolidation) and AdmitAtSeal on the leader (ISR admission at the
// seal). Every action is reported to Options.OnEvent and logged with the
// offsets and epochs that led to it.
//
// What it does not do: it does not run fetchers, serve fetches, or talk
// to the controller; the move (alter-log-dir) fetcher is the broker's,
// stopped by the broker around SetFutureLog.
package replica
