package policy

// Class is what a policy is allowed to know about a job. A replay that
// compares policies must compare them within a class, or say which class
// each result belongs to: a policy told each job's exact remaining work is
// answering an easier question than one that must estimate it.
type Class string

const (
	// ClassOracle knows each job's exact remaining work and true speed
	// (Optimus+Oracle as the Pollux artifact defines it). Useful as a bound,
	// never as a deployable result.
	ClassOracle Class = "oracle"
	// ClassDeclared also knows what a jobspec can declare (requested
	// workers, batch size, total epochs or steps from meta), used exactly as
	// declared.
	ClassDeclared Class = "declared"
	// ClassOnline knows only what has been observed: attained service, the
	// job's own measured speeds and progress, and jobs of the same kind that
	// have finished.
	ClassOnline Class = "online"
)

// Traits are the behaviours a driver of a policy (the simulator, the live
// planner) must honour; they are chosen here, never by matching a name.
type Traits struct {
	// FixedSize: every job runs at exactly its requested worker count, all
	// or nothing (Tiresias, FIFO). The caller sets Min = Max = requested and
	// Gang; a job larger than the cluster can never run.
	FixedSize bool
	// AdaptiveBatch: the policy's jobs pick their own batch size for each
	// allocation (AdaptDL/Pollux-style), and the job's SpeedModel predicts
	// goodput (throughput x statistical efficiency) rather than steps/s.
	AdaptiveBatch bool
	// UsesRemaining: the policy reads Job.Remaining (Optimus, goodput).
	// Pollux and Tiresias do not.
	UsesRemaining bool
	// KindPriors: the policy's jobs start from what finished jobs of the
	// same kind measured (their speed samples and the largest size they
	// ran at), on top of their own measurements. Pollux starts every job
	// from nothing.
	KindPriors bool
}

// Info describes a registered policy.
type Info struct {
	Name    string
	Class   Class
	Summary string // one line
	Traits  Traits
}

// ArtifactMode is implemented by policies whose published reference (the
// Pollux artifact) differs from their default in a way that is not an
// information question, such as a placement rule. A simulator reproducing
// the artifact calls UseArtifactMode on a fresh policy; the live planner
// never does.
type ArtifactMode interface {
	UseArtifactMode()
}
