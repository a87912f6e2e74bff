// voxelgrid runs PCL's pcl::VoxelGrid<pcl::PointXYZI> on a KITTI .bin file
// and writes the result as a KITTI .bin file. It produced the *.pcl.bin
// goldens next to it, which TestMatchesPCL compares zerohop's filter with.
//
// Build (Debian 12: libpcl-filters1.13, libeigen3-dev, libboost1.74-dev, and
// the headers of libpcl-dev):
//
//	g++ -O2 -std=c++17 -I/usr/include/pcl-1.13 -I/usr/include/eigen3 \
//	    voxelgrid.cpp -o voxelgrid \
//	    /usr/lib/x86_64-linux-gnu/libpcl_filters.so.1.13 \
//	    /usr/lib/x86_64-linux-gnu/libpcl_common.so.1.13
//
// Run: voxelgrid IN.bin OUT.bin LX LY LZ MIN_POINTS
#include <pcl/filters/voxel_grid.h>
#include <pcl/point_types.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s IN.bin OUT.bin LX LY LZ MIN_POINTS\n", argv[0]);
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::perror(argv[1]);
    return 1;
  }
  pcl::PointCloud<pcl::PointXYZI>::Ptr cloud(new pcl::PointCloud<pcl::PointXYZI>);
  float v[4];
  while (std::fread(v, sizeof(float), 4, in) == 4) {
    pcl::PointXYZI p;
    p.x = v[0];
    p.y = v[1];
    p.z = v[2];
    p.intensity = v[3];
    cloud->push_back(p);
  }
  std::fclose(in);
  cloud->is_dense = false;  // the input may hold NaN and Inf

  pcl::VoxelGrid<pcl::PointXYZI> grid;
  grid.setInputCloud(cloud);
  grid.setLeafSize(std::strtof(argv[3], nullptr), std::strtof(argv[4], nullptr), std::strtof(argv[5], nullptr));
  grid.setMinimumPointsNumberPerVoxel(static_cast<unsigned int>(std::atoi(argv[6])));
  pcl::PointCloud<pcl::PointXYZI> out;
  grid.filter(out);

  std::FILE* o = std::fopen(argv[2], "wb");
  if (!o) {
    std::perror(argv[2]);
    return 1;
  }
  for (const auto& p : out) {
    float w[4] = {p.x, p.y, p.z, p.intensity};
    std::fwrite(w, sizeof(float), 4, o);
  }
  std::fclose(o);
  std::fprintf(stderr, "%zu points -> %zu\n", cloud->size(), out.size());
  return 0;
}
