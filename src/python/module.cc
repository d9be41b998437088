// cann_dist._C: the compiled half of the Python package (python/cann_dist; docs/python.md).
// The package's __init__ registers ProcessGroupCDT as torch.distributed's "cdt" backend.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/python.h>

#include "python/process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "cann-dist-train's engine for torch.distributed (the \"cdt\" backend)";
  py::object base = py::module::import("torch._C._distributed_c10d").attr("ProcessGroup");
  py::class_<cdt::python::ProcessGroupCDT, c10::intrusive_ptr<cdt::python::ProcessGroupCDT>>(
      m, "ProcessGroupCDT", base)
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& secret,
                       const std::string& job_id, const std::string& advertise_host) {
             cdt::python::ProcessGroupOptions o;
             o.secret = secret;
             o.job_id = job_id;
             o.advertise_host = advertise_host;
             return c10::make_intrusive<cdt::python::ProcessGroupCDT>(store, rank, size, timeout,
                                                                      o);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("secret") = "", py::arg("job_id") = "cdt",
           py::arg("advertise_host") = "127.0.0.1",
           py::call_guard<py::gil_scoped_release>(),
           "Forms the group through `store` (every rank at once); "
           "torch.distributed.init_process_group(\"cdt\") calls this.");
}
