// Package send makes one HTTP attempt at a webhook's receiver and sorts
// its outcome (Sender, Request, Result, Class), over one shared connection
// pool. Guard refuses private, loopback and metadata addresses at dial
// time, every redirect hop included, and a redirect that leaves the URL's
// origin goes without the secret and credential-like headers. ParseHeader
// holds the rules for a webhook's header lines, and ErrUnbuildable marks a
// request that can never be built or sent, whichever package finds out.
//
// It imports nothing of Homing and no module but code.dny.dev/ssrf, which
// the Guard is built on.
package send
