// Command agent is the zerohop agent node: it takes slot handles from a
// camera, leases the slots, runs voxel filtering, inference and planning on
// the slot memory, and publishes cmd_vel. It only parses flags and wires
// packages together.
package main
