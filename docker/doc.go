// Package docker holds zerohop's container files: Dockerfile (x86-64 NVIDIA
// workstations), Dockerfile.jetson (JetPack 6, arm64), compose.yaml (camera
// and agent services), compose.jetson.yaml (the Jetson override) and
// compose.ros2.yaml (ROS 2 drivers as the camera's input).
//
// The package has no Go API. Its tests check, without a Docker engine, what
// can be checked of those files: that every flag a compose command passes
// exists in the binaries' --help, that the camera's socket and the volume
// carrying it agree between the services, that the healthchecks probe the
// addresses and routes the binaries serve, that the services run as a
// non-root user the camera admits, and that the Dockerfiles' stages, copies,
// users and pinned versions hang together. Building the images and running
// them on a GPU are not checked here; docker/README.md says what was and was
// not verified.
package docker
