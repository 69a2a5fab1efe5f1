package faultfs

// PageSize is the unit a torn write lands in, for the tests of tears.
const PageSize = pageSize

// GraveyardOf is where the mirror of backing keeps what was removed, for
// the tests that it lets go of it.
var GraveyardOf = graveyardOf
