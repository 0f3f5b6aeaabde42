"""The optimization memory's pure core: lesson records and the selection of lessons for a prompt."""
