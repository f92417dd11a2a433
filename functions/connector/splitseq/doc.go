// Package splitseq cuts a generator's event sequence (events 0, 1, 2, ...,
// each a pure function of its index) into K interleaved splits, for the
// generating sources of splits (datagen, nexmark; see
// connector.SourceType.Splits): split j holds the blocks b of Block
// consecutive events with b % K == j. A Seq walks the events of the splits
// one subtask owns in increasing event index, so the subtask's event time
// stays ordered, and keeps each split's next event for its position.
package splitseq
