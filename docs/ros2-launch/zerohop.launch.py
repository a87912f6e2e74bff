# zerohop's camera and agent next to a robot's ROS 2 drivers:
#
#   ros2 launch zerohop.launch.py bin_dir:=/opt/zerohop/bin params:=/path/params.yaml
#
# launch_ros runs each as
#   camera --ros-args -r __node:=zerohop_camera --params-file PARAMS
#   agent  --ros-args -r __node:=zerohop_agent --params-file PARAMS -r cmd_vel:=/diff_drive_controller/cmd_vel
# which the nodes read as a ROS node does (docs/ros2-launch.md).
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node


def generate_launch_description():
    bin_dir = LaunchConfiguration('bin_dir')
    params = LaunchConfiguration('params')
    return LaunchDescription([
        DeclareLaunchArgument('bin_dir', default_value='/opt/zerohop/bin',
                              description='folder with the camera and agent binaries'),
        DeclareLaunchArgument('params',
                              default_value=os.path.join(os.path.dirname(__file__), 'params.yaml'),
                              description='ROS 2 parameters file for both nodes'),
        Node(executable=PathJoinSubstitution([bin_dir, 'camera']), name='zerohop_camera',
             parameters=[params], output='screen'),
        Node(executable=PathJoinSubstitution([bin_dir, 'agent']), name='zerohop_agent',
             parameters=[params], output='screen',
             remappings=[('cmd_vel', '/diff_drive_controller/cmd_vel')]),
    ])
