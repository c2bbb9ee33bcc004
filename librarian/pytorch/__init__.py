"""What PyTorch shipped: the (torch, CUDA, Python, platform) release matrix as packaged data (``releases``),
its queries and GitHub build matrices (``matrix``), PyTorch's wheel index pages (``index_pages``) and the
user's refresh of the data from them (``refresh``)."""
