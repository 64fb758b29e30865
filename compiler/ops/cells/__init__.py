"""What the recurrent cell ops (``lstm``, ``gru``, ``convlstm``) share: the cell step written once
(:mod:`.program`), the three back ends it runs on (:mod:`.backends`) and the hardware side of
their lowerings and costs (:mod:`.hardware`)."""
