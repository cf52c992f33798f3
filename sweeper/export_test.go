package sweeper

// PollFull is how long a tick waits on its clock before it looks again at
// a full queue or a webhook it is probing: what a test advances a stub
// clock by to move a waiting tick on.
const PollFull = pollFull
