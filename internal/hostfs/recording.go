package hostfs

// Recording reports whether a snapshot is being recorded through r
// (Record). A reader that skips a read nothing in this run needs does it
// anyway while recording, so that a replay finds what the host had; and
// what is built only for Capture is built only then.
func (r *Root) Recording() bool { return r.recorder() != nil }
